// A design fault: $finish ends the simulation when a reaches 4'hf.
module fault_finish (
    input  wire [3:0] a,
    output wire [3:0] y
);
  assign y = a + 4'd1;
  always @(*) if (a == 4'hf) $finish;
endmodule
