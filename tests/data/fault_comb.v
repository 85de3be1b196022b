// A design fault: a combinational loop that never settles.
module fault_comb (
    input  wire [3:0] a,
    output wire [3:0] y
);
  assign y = y + a + 4'd1;
endmodule
