// A design fault: an assertion in the design ($fatal) fails when a is 4'hf.
module fault_fatal (
    input  wire [3:0] a,
    output wire [3:0] y
);
  assign y = a + 4'd1;
  always @(*) if (a == 4'hf) $fatal(1, "a must never be 15");
endmodule
