// An accumulator whose register is NOT reset: power-on state must be restored between tests
// (and between evaluations in one simulator process), or one test leaks into the next.
module accum (
    input  wire       clk,
    input  wire       rst_n,
    input  wire [3:0] din,
    output reg  [7:0] acc,
    output reg  [3:0] last
);
  reg [3:0] mem [0:1];
  always @(posedge clk) begin
    acc <= acc + {4'd0, din};
    mem[0] <= din;
    mem[1] <= mem[0];
    if (!rst_n) last <= 4'd0;
    else last <= mem[1];
  end
endmodule
