// traffic_light
//
// Moore controller for a two-way intersection: a main road and a side road.
// The main road rests on green. When a car waits on the side road (`car`)
// and the main road has had its minimum green time, the controller runs
// main yellow -> all red -> side green (fixed time) -> side yellow -> all
// red and returns to main green. `emergency` overrides everything (except
// reset) and parks the intersection in an all-red state for as long as it
// is held; when it drops, the controller restarts at main green.
//
// All outputs are decoded from the state register only (Moore), so they
// change just after a rising edge.
//
// Light encoding on main_light / side_light: 00 red, 01 yellow, 10 green.
//
// Reset: synchronous, active high (rst). Reset state: main green, timer 0.

module traffic_light #(
    parameter [2:0] MAIN_GREEN_MIN = 3'd4, // minimum main green, cycles
    parameter [2:0] SIDE_GREEN     = 3'd3, // side green, cycles
    parameter [2:0] YELLOW         = 3'd2, // each yellow phase, cycles
    parameter [2:0] ALL_RED        = 3'd1  // each all-red phase, cycles
) (
    input  wire       clk,
    input  wire       rst,          // synchronous reset, active high
    input  wire       car,          // a car waits on the side road
    input  wire       emergency,    // force all red
    output reg  [1:0] main_light,
    output reg  [1:0] side_light,
    output wire [2:0] state         // current state code
);

    localparam [1:0] RED = 2'b00, YEL = 2'b01, GRN = 2'b10;

    localparam [2:0] S_MAIN_GREEN  = 3'd0,
                     S_MAIN_YELLOW = 3'd1,
                     S_RED_TO_SIDE = 3'd2,   // all red, side goes next
                     S_SIDE_GREEN  = 3'd3,
                     S_SIDE_YELLOW = 3'd4,
                     S_RED_TO_MAIN = 3'd5,   // all red, main goes next
                     S_EMERGENCY   = 3'd6;   // all red while emergency is held

    reg [2:0] cur;
    reg [2:0] timer;      // cycles already spent in the current state
    reg [2:0] nxt;

    assign state = cur;

    // Timer that has reached the last cycle of a phase of length `len`.
    function expired;
        input [2:0] t;
        input [2:0] len;
        begin
            expired = (t >= len - 3'd1);
        end
    endfunction

    // Next-state logic.
    always @(*) begin
        nxt = cur;
        if (emergency) begin
            nxt = S_EMERGENCY;
        end else begin
            case (cur)
                S_MAIN_GREEN:  if (car && expired(timer, MAIN_GREEN_MIN)) nxt = S_MAIN_YELLOW;
                S_MAIN_YELLOW: if (expired(timer, YELLOW))     nxt = S_RED_TO_SIDE;
                S_RED_TO_SIDE: if (expired(timer, ALL_RED))    nxt = S_SIDE_GREEN;
                S_SIDE_GREEN:  if (expired(timer, SIDE_GREEN)) nxt = S_SIDE_YELLOW;
                S_SIDE_YELLOW: if (expired(timer, YELLOW))     nxt = S_RED_TO_MAIN;
                S_RED_TO_MAIN: if (expired(timer, ALL_RED))    nxt = S_MAIN_GREEN;
                S_EMERGENCY:   nxt = S_MAIN_GREEN;   // emergency released
                default:       nxt = S_MAIN_GREEN;   // unused code 7: recover
            endcase
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            cur   <= S_MAIN_GREEN;
            timer <= 3'd0;
        end else begin
            cur <= nxt;
            if (nxt != cur)
                timer <= 3'd0;                     // new phase starts counting
            else if (timer < MAIN_GREEN_MIN - 3'd1)
                timer <= timer + 3'd1;             // saturate: main green may wait forever
        end
    end

    // Moore output decode.
    always @(*) begin
        case (cur)
            S_MAIN_GREEN:  begin main_light = GRN; side_light = RED; end
            S_MAIN_YELLOW: begin main_light = YEL; side_light = RED; end
            S_SIDE_GREEN:  begin main_light = RED; side_light = GRN; end
            S_SIDE_YELLOW: begin main_light = RED; side_light = YEL; end
            default:       begin main_light = RED; side_light = RED; end
        endcase
    end

endmodule
