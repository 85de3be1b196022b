// SystemVerilog-lite as found in public benchmarks: logic, always_comb, always_ff.
module mux_reg (
    input  logic       clk,
    input  logic       rst,
    input  logic       sel,
    input  logic [3:0] a,
    input  logic [3:0] b,
    output logic [3:0] y,
    output logic [3:0] y_q
);
  always_comb begin
    y = sel ? b : a;
  end
  always_ff @(posedge clk) begin
    if (rst) y_q <= '0;
    else y_q <= y;
  end
endmodule
