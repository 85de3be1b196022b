// seq_detector_mealy
//
// Mealy state machine that watches a serial bit stream on `din` and flags
// every occurrence of the pattern 1-0-1-1 (first bit first). A bit is only
// consumed on a rising edge where `valid` is high; cycles with valid low
// leave the machine untouched. Matches may overlap: the trailing "1" of one
// match can start the next one (1011011 gives two matches).
//
// `match` is a Mealy output: it is decoded combinationally from the current
// state and the bit being presented, so it is high during the cycle in which
// the final "1" is on `din` with `valid` high, before the clock edge that
// consumes it.
//
// Reset: synchronous, active low (rst_n). The machine returns to IDLE.

module seq_detector_mealy (
    input  wire clk,
    input  wire rst_n,   // synchronous reset, active low
    input  wire din,     // serial data bit
    input  wire valid,   // din is consumed on this edge only when valid = 1
    output wire match    // combinational: this bit completes 1011
);

    // State = longest prefix of 1011 that the consumed bits end with.
    localparam [1:0] S_IDLE = 2'd0,   // no useful prefix
                     S_1    = 2'd1,   // seen "1"
                     S_10   = 2'd2,   // seen "10"
                     S_101  = 2'd3;   // seen "101"

    reg [1:0] state;
    reg [1:0] next_state;

    // Next-state logic (only consulted when a bit is consumed).
    always @(*) begin
        case (state)
            S_IDLE:  next_state = din ? S_1   : S_IDLE;
            S_1:     next_state = din ? S_1   : S_10;    // "11" still ends in "1"
            S_10:    next_state = din ? S_101 : S_IDLE;  // "100" kills the prefix
            S_101:   next_state = din ? S_1   : S_10;    // overlap: "1011"->"1", "1010"->"10"
            default: next_state = S_IDLE;
        endcase
    end

    always @(posedge clk) begin
        if (!rst_n)
            state <= S_IDLE;
        else if (valid)
            state <= next_state;
    end

    // Mealy output: last bit of the pattern presented right now.
    assign match = valid && (state == S_101) && din;

endmodule
