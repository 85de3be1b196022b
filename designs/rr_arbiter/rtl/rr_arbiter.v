// rr_arbiter
//
// Four-requester round-robin arbiter with a registered one-hot grant.
//
// A 2-bit priority pointer names the requester that has the highest
// priority; priority then falls in increasing index order, wrapping around
// (ptr, ptr+1, ptr+2, ptr+3, all mod 4). At every rising edge:
//   * hold = 1 and the currently granted requester still requests:
//       the grant is kept and the pointer does not move;
//   * otherwise the arbiter re-arbitrates: the highest-priority active
//       request wins, the grant becomes its one-hot code and the pointer moves
//       to the requester after the winner (winner + 1 mod 4), so the winner
//       has the lowest priority next time;
//   * no request at all: the grant goes to 0 and the pointer stays.
//
// Reset: asynchronous, active low (rst_n). Grant 0, pointer 0.

module rr_arbiter (
    input  wire       clk,
    input  wire       rst_n,      // asynchronous reset, active low
    input  wire [3:0] req,        // request lines, one per requester
    input  wire       hold,       // keep a grant while its owner requests
    output reg  [3:0] grant       // registered one-hot grant (or 0)
);

    reg  [1:0] ptr;               // index of the highest-priority requester

    // Requests rotated right by the pointer: bit 0 is the requester at the
    // pointer, bit 1 the next one, and so on.
    wire [7:0] req_dbl = {req, req};
    wire [3:0] req_rot = req_dbl[{1'b0, ptr} +: 4];

    // Offset (from the pointer) of the first active rotated request.
    reg  [1:0] offset;
    always @(*) begin
        if (req_rot[0])
            offset = 2'd0;
        else if (req_rot[1])
            offset = 2'd1;
        else if (req_rot[2])
            offset = 2'd2;
        else
            offset = 2'd3;
    end

    // Winner index; the 2-bit sum wraps around modulo 4.
    wire [1:0] winner = ptr + offset;

    // The current owner (if any) is still requesting.
    wire owner_active = (grant & req) != 4'b0000;

    always @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            grant <= 4'b0000;
            ptr   <= 2'd0;
        end else if (hold && owner_active) begin
            grant <= grant;                      // locked: keep grant and pointer
        end else if (req_rot == 4'b0000) begin
            grant <= 4'b0000;                    // nobody asks: release, pointer stays
        end else begin
            grant <= 4'b0001 << winner;          // one-hot code of the winner
            ptr   <= winner + 2'd1;              // winner becomes lowest priority
        end
    end

endmodule
