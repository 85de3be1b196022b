// lfsr: 8-bit Fibonacci linear-feedback shift register.
//
// Polynomial x^8 + x^6 + x^5 + x^4 + 1 (taps 8,6,5,4), maximal length: from
// any non-zero state it walks through all 255 non-zero values before
// repeating. Tap n is state bit n-1; the register shifts towards the MSB and
// the XOR of the taps enters at bit 0.
//
//  * rst  : active-high SYNCHRONOUS reset to INIT (8'h01).
//  * load : loads seed on the next edge (priority over en). The all-zero
//           state would lock the LFSR, so a zero seed loads ZERO_SUB instead.
//  * en   : advance one step per clock.
//  * sout : serial output, the MSB (the bit shifted out by the next step).
module lfsr #(
    parameter [7:0] INIT     = 8'h01,   // reset value
    parameter [7:0] ZERO_SUB = 8'hFF    // loaded instead of a zero seed
) (
    input  wire       clk,
    input  wire       rst,
    input  wire       en,
    input  wire       load,
    input  wire [7:0] seed,
    output reg  [7:0] q,
    output wire       sout
);

    // Feedback: XOR of taps 8, 6, 5 and 4 (state bits 7, 5, 4, 3).
    wire fb = q[7] ^ q[5] ^ q[4] ^ q[3];

    assign sout = q[7];

    always @(posedge clk) begin
        if (rst) begin
            q <= INIT;
        end else if (load) begin
            // Never enter the all-zero lock-up state.
            q <= (seed == 8'h00) ? ZERO_SUB : seed;
        end else if (en) begin
            q <= {q[6:0], fb};
        end
    end

endmodule
