// counter_en_load: WIDTH-bit up/down counter with count enable and
// synchronous parallel load.
//
//  * rst_n  : active-low SYNCHRONOUS reset, clears the count to 0.
//  * load   : loads d on the next rising edge; has priority over counting
//             (en/up are ignored while load is high).
//  * en, up : when en is high the counter steps by one per clock, upwards
//             when up = 1, downwards when up = 0. Both directions wrap
//             around (MAX+1 -> 0, 0-1 -> MAX).
//  * tc     : terminal count, combinational: high while the count sits at
//             the last value of the selected direction (MAX counting up,
//             0 counting down). It does not depend on en or load.
module counter_en_load #(
    parameter WIDTH = 8
) (
    input  wire             clk,
    input  wire             rst_n,
    input  wire             en,
    input  wire             load,
    input  wire             up,
    input  wire [WIDTH-1:0] d,
    output reg  [WIDTH-1:0] q,
    output wire             tc
);

    localparam [WIDTH-1:0] ZERO = {WIDTH{1'b0}};
    localparam [WIDTH-1:0] ONE  = {{(WIDTH-1){1'b0}}, 1'b1};
    localparam [WIDTH-1:0] MAX  = {WIDTH{1'b1}};

    // Terminal count follows the selected direction: it is the value from
    // which the next step in that direction wraps around.
    assign tc = up ? (q == MAX) : (q == ZERO);

    always @(posedge clk) begin
        if (!rst_n) begin
            q <= ZERO;
        end else if (load) begin
            // Load beats counting, whatever en/up say.
            q <= d;
        end else begin
            case ({en, up})
                2'b11:   q <= q + ONE;   // count up, MAX wraps to 0
                2'b10:   q <= q - ONE;   // count down, 0 wraps to MAX
                default: q <= q;         // en low: hold
            endcase
        end
    end

endmodule
