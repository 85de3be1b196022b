// An 8-bit counter with enable and a combinational terminal-count flag: a small design for
// timing-rule tests (registered q, combinational tc).
module counter (
    input  wire       clk,
    input  wire       rst_n,
    input  wire       en,
    output reg  [7:0] q,
    output wire       tc
);
  assign tc = en && (q == 8'hff);
  always @(posedge clk) begin
    if (!rst_n) q <= 8'd0;
    else if (en) q <= q + 8'd1;
  end
endmodule
