// shift_register: WIDTH-bit bidirectional shift register with serial input,
// synchronous parallel load and shift enable.
//
//  * rst  : active-high ASYNCHRONOUS reset, clears q to 0 at once.
//  * load : parallel load of d on the next rising edge; has priority over
//           shifting and does not need en.
//  * en   : shift enable; when high (and load low) q shifts by one bit per
//           clock in the direction selected by dir.
//  * dir  : 0 = shift left (towards the MSB, sin enters at bit 0),
//           1 = shift right (towards the LSB, sin enters at the MSB).
//  * sout : the bit that the next shift in the selected direction pushes
//           out (q[MSB] for left, q[0] for right). Combinational in dir.
module shift_register #(
    parameter WIDTH = 8
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             en,
    input  wire             load,
    input  wire             dir,
    input  wire             sin,
    input  wire [WIDTH-1:0] d,
    output reg  [WIDTH-1:0] q,
    output wire             sout
);

    localparam DIR_LEFT = 1'b0;

    // Serial output: the edge bit on the side we are shifting towards.
    assign sout = (dir == DIR_LEFT) ? q[WIDTH-1] : q[0];

    always @(posedge clk or posedge rst) begin
        if (rst) begin
            q <= {WIDTH{1'b0}};
        end else begin
            // {load, en, dir}: load wins; en only matters when not loading.
            casez ({load, en, dir})
                3'b1??:  q <= d;                        // parallel load
                3'b010:  q <= {q[WIDTH-2:0], sin};      // left: sin -> LSB
                3'b011:  q <= {sin, q[WIDTH-1:1]};      // right: sin -> MSB
                default: q <= q;                        // disabled: hold
            endcase
        end
    end

endmodule
