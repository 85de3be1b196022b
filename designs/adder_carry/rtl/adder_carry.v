// ---------------------------------------------------------------------------
// adder_carry: combinational WIDTH-bit adder with carry in and carry out.
//
//   {cout, sum} = a + b + cin
//   overflow    = two's-complement overflow of the same addition: set when
//                 a and b have the same sign and sum has the other sign.
//
// The adder is split into a low and a high section (a two-stage carry
// ripple); the carry out of the low section feeds the high section.
// Purely combinational: no clock, no reset.
// ---------------------------------------------------------------------------
module adder_carry #(
    parameter WIDTH = 8                  // operand width, must be even
) (
    input  wire [WIDTH-1:0] a,           // first operand
    input  wire [WIDTH-1:0] b,           // second operand
    input  wire             cin,         // carry in (adds 1 when set)
    output wire [WIDTH-1:0] sum,         // sum modulo 2**WIDTH
    output wire             cout,        // carry out of the MSB
    output wire             overflow     // signed (two's-complement) overflow
);

    localparam LO = WIDTH / 2;           // width of the low section
    localparam HI = WIDTH - LO;          // width of the high section

    // Low section: one extra bit on the left holds its carry out.
    wire [LO:0] lo_sum = {1'b0, a[LO-1:0]} + {1'b0, b[LO-1:0]}
                       + {{LO{1'b0}}, cin};

    // High section: carry in is the carry out of the low section.
    wire [HI:0] hi_sum = {1'b0, a[WIDTH-1:LO]} + {1'b0, b[WIDTH-1:LO]}
                       + {{HI{1'b0}}, lo_sum[LO]};

    assign sum  = {hi_sum[HI-1:0], lo_sum[LO-1:0]};
    assign cout = hi_sum[HI];

    // Signed overflow: both operands share a sign bit and the result's sign
    // differs from it (e.g. positive + positive giving a negative result).
    // cin is treated as an unsigned +1 and does not change this rule.
    assign overflow = (a[WIDTH-1] == b[WIDTH-1]) && (sum[WIDTH-1] != a[WIDTH-1]);

endmodule
