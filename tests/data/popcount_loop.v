// Population count with a `while` loop in an always block. Mutating the loop counter's
// update (`i = i + 1` -> `i = i - 1`, `i + 0`, ...) gives mutants that never leave the loop:
// their simulation does not terminate.
module popcount_loop (
    input  wire       clk,
    input  wire       rst,
    input  wire [7:0] d,
    output reg  [3:0] count
);
  integer i;
  reg [3:0] acc;
  always @(*) begin
    acc = 4'd0;
    i = 0;
    while (i < 8) begin
      acc = acc + {3'd0, d[i]};
      i = i + 1;
    end
  end
  always @(posedge clk) begin
    if (rst) count <= 4'd0;
    else count <= acc;
  end
endmodule
