// debouncer
//
// Debounces a 1-bit input (a switch or a button). The raw input first goes
// through a two-flop synchronizer; the debounced output `clean` then takes a
// new value only after the synchronized input has differed from `clean` for
// STABLE_CYCLES consecutive clock edges. Any edge at which the synchronized
// input equals `clean` again restarts the count. `changed` pulses for one
// cycle together with every change of `clean`.
//
// All outputs are registered.
//
// Reset: synchronous, active high (rst). Synchronizer, counter, clean and
// changed all reset to 0.

module debouncer #(
    parameter [2:0] STABLE_CYCLES = 3'd4   // required stable edges (1..7)
) (
    input  wire clk,
    input  wire rst,          // synchronous reset, active high
    input  wire noisy,        // raw, possibly bouncing input
    output reg  clean,        // debounced level
    output reg  changed       // one-cycle pulse when clean changes
);

    reg       sync_a;         // first synchronizer stage
    reg       sync_b;         // second stage: the value the filter looks at
    reg [2:0] cnt;            // consecutive edges with sync_b != clean

    wire differs = (sync_b ^ clean);

    always @(posedge clk) begin
        if (rst) begin
            sync_a  <= 1'b0;
            sync_b  <= 1'b0;
            cnt     <= 3'd0;
            clean   <= 1'b0;
            changed <= 1'b0;
        end else begin
            sync_a  <= noisy;
            sync_b  <= sync_a;
            changed <= 1'b0;
            if (!differs) begin
                cnt <= 3'd0;                        // back at the old level
            end else if (cnt >= STABLE_CYCLES - 3'd1) begin
                clean   <= sync_b;                  // stable long enough: accept
                changed <= 1'b1;
                cnt     <= 3'd0;
            end else begin
                cnt <= cnt + 3'd1;                  // one more stable edge
            end
        end
    end

endmodule
