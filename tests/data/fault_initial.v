// A design fault at start-up: $fatal in an initial block, before any test runs.
module fault_initial (
    input  wire [3:0] a,
    output wire [3:0] y
);
  assign y = a + 4'd1;
  initial $fatal(1, "this design refuses to start");
endmodule
