// ---------------------------------------------------------------------------
// alu_flags: combinational WIDTH-bit ALU with zero/carry/negative/overflow
// flags.
//
//   op  mnemonic  result             carry                 overflow
//   000 ADD       a + b              carry out of MSB      signed overflow
//   001 SUB       a - b              borrow (a < b unsgn)  signed overflow
//   010 AND       a & b              0                     0
//   011 OR        a | b              0                     0
//   100 XOR       a ^ b              0                     0
//   101 SHL       a << 1             a[MSB] (bit out)      a[MSB] ^ a[MSB-1]
//   110 SHR       a >> 1 (logical)   a[0]   (bit out)      0
//   111 SLTU      a < b ? 1 : 0      0                     0
//
//   zero     = (result == 0)  for every opcode
//   negative = result[MSB]    for every opcode
// Purely combinational: no clock, no reset.
// ---------------------------------------------------------------------------
module alu_flags #(
    parameter WIDTH = 8
) (
    input  wire [WIDTH-1:0] a,           // first operand
    input  wire [WIDTH-1:0] b,           // second operand (unused by shifts)
    input  wire [2:0]       op,          // operation select, see table above
    output reg  [WIDTH-1:0] result,      // operation result
    output wire             zero,        // result is all zeros
    output reg              carry,       // carry / borrow / shifted-out bit
    output wire             negative,    // MSB of result
    output reg              overflow     // signed overflow
);

    localparam [2:0] OP_ADD  = 3'd0,
                     OP_SUB  = 3'd1,
                     OP_AND  = 3'd2,
                     OP_OR   = 3'd3,
                     OP_XOR  = 3'd4,
                     OP_SHL  = 3'd5,
                     OP_SHR  = 3'd6,
                     OP_SLTU = 3'd7;

    localparam MSB = WIDTH - 1;

    // Shared WIDTH+1 bit add and subtract; the extra top bit is the carry
    // out of the addition, or the borrow of the subtraction (it is 1 when
    // the unsigned difference wraps below zero).
    wire [WIDTH:0] add_full = {1'b0, a} + {1'b0, b};
    wire [WIDTH:0] sub_full = {1'b0, a} - {1'b0, b};

    always @* begin
        // defaults: flags cleared, result zero
        result   = {WIDTH{1'b0}};
        carry    = 1'b0;
        overflow = 1'b0;
        case (op)
            OP_ADD: begin
                result   = add_full[MSB:0];
                carry    = add_full[WIDTH];
                // same-sign operands, result of the other sign
                overflow = (a[MSB] == b[MSB]) && (result[MSB] != a[MSB]);
            end
            OP_SUB: begin
                result   = sub_full[MSB:0];
                carry    = sub_full[WIDTH];          // borrow
                // operands of different sign, result sign differs from a
                overflow = (a[MSB] != b[MSB]) && (result[MSB] != a[MSB]);
            end
            OP_AND: result = a & b;
            OP_OR:  result = a | b;
            OP_XOR: result = a ^ b;
            OP_SHL: begin
                result   = {a[MSB-1:0], 1'b0};
                carry    = a[MSB];                   // bit shifted out
                overflow = a[MSB] ^ a[MSB-1];        // sign bit changed
            end
            OP_SHR: begin
                result   = {1'b0, a[MSB:1]};
                carry    = a[0];                     // bit shifted out
            end
            OP_SLTU: begin
                // 1 when a is below b as unsigned numbers, else 0
                // (upper bits keep their default of 0)
                result[0] = (a < b);
            end
            default: ;                               // all 8 codes decoded above
        endcase
    end

    assign zero     = (result == {WIDTH{1'b0}});
    assign negative = result[MSB];

endmodule
