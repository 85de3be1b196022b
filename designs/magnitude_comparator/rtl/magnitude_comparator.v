// ---------------------------------------------------------------------------
// magnitude_comparator: combinational WIDTH-bit comparator, signed or
// unsigned.
//
// signed_mode = 0: a and b are unsigned (0 .. 2**WIDTH-1).
// signed_mode = 1: a and b are two's complement (-2**(WIDTH-1) .. 2**(WIDTH-1)-1).
// Exactly one of lt, eq, gt is 1 at any time.
// Purely combinational: no clock, no reset.
// ---------------------------------------------------------------------------
module magnitude_comparator #(
    parameter WIDTH = 8
) (
    input  wire [WIDTH-1:0] a,           // first operand
    input  wire [WIDTH-1:0] b,           // second operand
    input  wire             signed_mode, // 1: compare as two's complement
    output reg              lt,          // a <  b
    output wire             eq,          // a == b
    output reg              gt           // a >  b
);

    localparam MSB = WIDTH - 1;

    // Unsigned magnitude from one WIDTH+1 bit subtractor: the top bit is the
    // borrow (set when a < b as unsigned numbers), and a zero difference
    // means equal operands.
    wire [WIDTH:0] diff   = {1'b0, a} - {1'b0, b};
    wire           borrow = diff[WIDTH];
    wire           same   = (diff[MSB:0] == {WIDTH{1'b0}});

    // Equality does not depend on the number format.
    assign eq = same;

    // Operands whose sign bits differ are the only case where the signed
    // and unsigned orders disagree.
    wire sign_differs = a[MSB] ^ b[MSB];

    always @* begin
        if (signed_mode && sign_differs) begin
            // the operand with its sign bit set is the negative one
            lt = a[MSB];
            gt = b[MSB];
        end else begin
            // same sign (or unsigned mode): unsigned magnitude order
            lt = borrow;
            gt = !borrow && !same;
        end
    end

endmodule
