// A hand-written schemata: mutant 1 closes a combinational loop that never settles, so its
// simulator process dies ("didn't converge"); golden (selector 0) is a plain adder.
module loopy (
    input  wire [3:0] a,
    input  wire [3:0] b,
    output wire [3:0] y
);
  reg [31:0] hwtp_mutant_sel /*verilator public_flat_rw*/;
  initial begin if (!$value$plusargs("hwtp_mutant=%d", hwtp_mutant_sel)) hwtp_mutant_sel = 32'd0; end
  assign y = (hwtp_mutant_sel == 32'd1) ? (y + a + 4'd1) : (a + b);
endmodule
