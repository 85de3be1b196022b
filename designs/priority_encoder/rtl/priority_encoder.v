// ---------------------------------------------------------------------------
// priority_encoder: combinational 8-to-3 priority encoder with enable.
//
// index is the position of the highest set bit of req (bit 7 has the
// highest priority, bit 0 the lowest). valid is 1 when enable is 1 and at
// least one request bit is set. When valid is 0 (no request, or enable
// low), index is forced to 0.
// Purely combinational: no clock, no reset.
// ---------------------------------------------------------------------------
module priority_encoder (
    input  wire       enable,            // 0: outputs forced to 0
    input  wire [7:0] req,               // request vector, bit 7 wins
    output reg  [2:0] index,             // position of highest set request
    output wire       valid              // some request is set (and enabled)
);

    assign valid = enable && (req != 8'd0);

    always @* begin
        if (!enable) begin
            index = 3'd0;
        end else begin
            // casez: the first matching item wins, '?' bits are ignored,
            // so lower-priority requests cannot change the result.
            casez (req)
                8'b1???????: index = 3'd7;
                8'b01??????: index = 3'd6;
                8'b001?????: index = 3'd5;
                8'b0001????: index = 3'd4;
                8'b00001???: index = 3'd3;
                8'b000001??: index = 3'd2;
                8'b0000001?: index = 3'd1;
                // only req[0], or no request at all: index 0 either way
                // (valid tells the two apart)
                default:     index = 3'd0;
            endcase
        end
    end

endmodule
