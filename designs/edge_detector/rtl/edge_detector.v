// edge_detector: rising / falling / any-edge detector for an asynchronous
// 1-bit input.
//
// din goes through a two-flop synchronizer (sync1 -> sync2); a third flop
// (prev) keeps the previous synchronized value, and the comparison of sync2
// with prev is registered into the pulse outputs. Total latency from the
// first rising edge that samples a new din value to the pulse is 3 edges;
// each pulse lasts exactly one clock cycle per synchronized transition.
//
//  * rst_n: active-low ASYNCHRONOUS reset; every flop, including the
//    synchronizer, clears to 0 (so din = 1 at reset release is seen as a
//    rising edge).
module edge_detector (
    input  wire clk,
    input  wire rst_n,
    input  wire din,
    output reg  rise,
    output reg  fall,
    output reg  any
);

    reg sync1;   // first synchronizer stage (may go metastable in silicon)
    reg sync2;   // second synchronizer stage: the safe, synchronized din
    reg prev;    // sync2 delayed by one cycle

    always @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            sync1 <= 1'b0;
            sync2 <= 1'b0;
            prev  <= 1'b0;
            rise  <= 1'b0;
            fall  <= 1'b0;
            any   <= 1'b0;
        end else begin
            sync1 <= din;
            sync2 <= sync1;
            prev  <= sync2;
            // {current, previous} synchronized value: 10 = rising, 01 = falling.
            case ({sync2, prev})
                2'b10: begin
                    rise <= 1'b1;
                    fall <= 1'b0;
                end
                2'b01: begin
                    rise <= 1'b0;
                    fall <= 1'b1;
                end
                default: begin      // no change
                    rise <= 1'b0;
                    fall <= 1'b0;
                end
            endcase
            any <= sync2 ^ prev;    // either edge
        end
    end

endmodule
