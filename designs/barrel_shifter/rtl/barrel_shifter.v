// ---------------------------------------------------------------------------
// barrel_shifter: combinational 8-bit shifter/rotator, shift by 0..7.
//
//   mode 00  LSL  logical shift left,  zeros enter at bit 0
//   mode 01  LSR  logical shift right, zeros enter at bit 7
//   mode 10  ASR  arithmetic shift right, copies of bit 7 enter at bit 7
//   mode 11  ROR  rotate right, bits leaving bit 0 re-enter at bit 7
//
// Purely combinational: no clock, no reset.
// ---------------------------------------------------------------------------
module barrel_shifter (
    input  wire [7:0] data,              // value to shift
    input  wire [2:0] amt,               // shift amount, 0..7
    input  wire [1:0] mode,              // see table above
    output reg  [7:0] out                // shifted value
);

    // mode encodings (2'b11 = ROR is the case default below)
    localparam [1:0] MODE_LSL = 2'b00,
                     MODE_LSR = 2'b01,
                     MODE_ASR = 2'b10;

    // Rotate right by amt = (data >> amt) OR (data << (8 - amt)): the bits
    // that fall off bit 0 come back in at the top. For amt = 0 the left
    // shift is by 8, which clears every bit, so the rotate returns data.
    wire [3:0] back = 4'd8 - {1'b0, amt};
    wire [7:0] ror  = (data >> amt) | (data << back);

    // Arithmetic right shift: the sign bit is replicated into the vacated
    // top positions.
    wire signed [7:0] asr = $signed(data) >>> amt;

    always @* begin
        case (mode)
            MODE_LSL: out = data << amt;
            MODE_LSR: out = data >> amt;
            MODE_ASR: out = asr;
            default:  out = ror;         // MODE_ROR, the only code left
        endcase
    end

endmodule
