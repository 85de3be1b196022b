// uart_tx
//
// UART transmitter, 8N1: one start bit (0), eight data bits LSB first, one
// stop bit (1), no parity. Every bit lasts CLKS_PER_BIT clock cycles.
//
// A frame starts on a rising edge where `start` is high while the
// transmitter is idle (busy = 0); `data` is captured on that same edge.
// `start` seen while busy is ignored. After the stop bit the transmitter
// returns to idle and pulses `done` for one cycle. All outputs are
// registered: they change only just after a rising edge.
//
// Reset: synchronous, active low (rst_n). tx = 1 (line idle), busy = 0,
// done = 0.

module uart_tx #(
    parameter [2:0] CLKS_PER_BIT = 3'd4  // clock cycles per bit (2..7)
) (
    input  wire       clk,
    input  wire       rst_n,            // synchronous reset, active low
    input  wire       start,            // request to send `data`
    input  wire [7:0] data,             // byte to send, captured with start
    output reg        tx,               // serial line, idles high
    output wire       busy,             // a frame is in progress
    output reg        done              // one-cycle pulse after the stop bit
);

    localparam [1:0] IDLE  = 2'd0,
                     START = 2'd1,
                     DATA  = 2'd2,
                     STOP  = 2'd3;

    reg [1:0] phase;
    reg [2:0] clk_cnt;                  // cycles already spent in this bit
    reg [2:0] bit_idx;                  // data bit being sent
    reg [7:0] shreg;                    // captured byte

    // Last cycle of the current bit period.
    wire bit_end = (clk_cnt == CLKS_PER_BIT - 3'd1);

    assign busy = (phase != IDLE);

    always @(posedge clk) begin
        if (!rst_n) begin
            phase   <= IDLE;
            clk_cnt <= 3'd0;
            bit_idx <= 3'd0;
            shreg   <= 8'h00;
            tx      <= 1'b1;
            done    <= 1'b0;
        end else begin
            done <= 1'b0;                        // default: no pulse
            // Bit timer: counts 0 .. CLKS_PER_BIT-1 inside every bit.
            if (phase == IDLE || bit_end)
                clk_cnt <= 3'd0;
            else
                clk_cnt <= clk_cnt + 3'd1;

            case (phase)
                IDLE: begin
                    tx <= 1'b1;
                    if (start) begin
                        shreg   <= data;         // latch the byte
                        bit_idx <= 3'd0;
                        tx      <= 1'b0;         // start bit
                        phase   <= START;
                    end
                end
                START: begin
                    if (bit_end) begin
                        tx    <= shreg[0];       // first data bit (LSB)
                        phase <= DATA;
                    end
                end
                DATA: begin
                    if (bit_end) begin
                        if (bit_idx == 3'd7) begin
                            tx    <= 1'b1;       // stop bit
                            phase <= STOP;
                        end else begin
                            bit_idx <= bit_idx + 3'd1;
                            tx      <= shreg[bit_idx + 3'd1];
                        end
                    end
                end
                STOP: begin
                    if (bit_end) begin
                        phase <= IDLE;
                        done  <= 1'b1;           // frame complete
                    end
                end
                default: phase <= IDLE;
            endcase
        end
    end

endmodule
