// ---------------------------------------------------------------------------
// gray_converter: combinational WIDTH-bit binary <-> reflected Gray code
// converters, plus the parity of the binary input.
//
//   gray_out = bin_in ^ (bin_in >> 1)                  (binary -> Gray)
//   bin_out[i] = XOR of gray_in[WIDTH-1:i]             (Gray -> binary)
//   parity   = XOR of all bits of bin_in (1 = odd number of ones)
//
// The two converters are independent. Purely combinational.
// ---------------------------------------------------------------------------
module gray_converter #(
    parameter WIDTH = 6                  // 2..8 (the decoder has 3 XOR stages)
) (
    input  wire [WIDTH-1:0] bin_in,      // binary value to encode
    input  wire [WIDTH-1:0] gray_in,     // Gray value to decode
    output wire [WIDTH-1:0] gray_out,    // Gray code of bin_in
    output wire [WIDTH-1:0] bin_out,     // binary value of gray_in
    output wire             parity       // odd parity of bin_in
);

    // Binary -> Gray: each Gray bit is the XOR of a binary bit and its
    // left neighbour; the MSB is copied (it is XORed with 0).
    assign gray_out = bin_in ^ (bin_in >> 1);

    // Gray -> binary: bin_out[i] is the XOR of gray_in[i] and every bit
    // above it (a prefix XOR from the MSB down). Computed in log2 steps:
    // after the step with shift s, bit i holds the XOR of the 2*s Gray bits
    // starting at i, so shifts 1, 2, 4 cover up to 8 bits.
    wire [WIDTH-1:0] px1 = gray_in ^ (gray_in >> 1);  // XOR of 2 bits
    wire [WIDTH-1:0] px2 = px1     ^ (px1     >> 2);  // XOR of 4 bits
    assign bin_out       = px2     ^ (px2     >> 4);  // XOR of 8 bits

    assign parity = ^bin_in;

endmodule
