// fifo_sync: single-clock FIFO, DEPTH entries of DATA_W bits, with a
// registered read port.
//
//  * A write (wr_en) stores wr_data at the tail; it is accepted when the
//    FIFO is not full, or when it is full but a read is accepted in the same
//    cycle (the read frees the slot). Otherwise it is dropped.
//  * A read (rd_en) is accepted when the FIFO is not empty: the head entry
//    is copied into the rd_data register on that rising edge and removed.
//    A read of an empty FIFO is ignored and rd_data keeps its value; there
//    is no fall-through of a word written in the same cycle.
//  * count, full and empty describe the occupancy after the last edge;
//    full and empty are decoded from count.
//  * rst_n: active-low ASYNCHRONOUS reset; clears pointers, count, storage
//    and rd_data.
module fifo_sync #(
    parameter DATA_W = 8,
    parameter DEPTH  = 4,    // must be a power of two (pointers wrap naturally)
    parameter PTR_W  = 2,    // log2(DEPTH)
    parameter CNT_W  = 3     // log2(DEPTH)+1, holds 0..DEPTH
) (
    input  wire              clk,
    input  wire              rst_n,
    input  wire              wr_en,
    input  wire [DATA_W-1:0] wr_data,
    input  wire              rd_en,
    output reg  [DATA_W-1:0] rd_data,
    output wire              full,
    output wire              empty,
    output reg  [CNT_W-1:0]  count
);

    localparam [CNT_W-1:0] CNT_FULL = DEPTH;

    reg [DATA_W-1:0] mem [0:DEPTH-1];
    reg [PTR_W-1:0]  wr_ptr;   // next slot to write; wraps DEPTH-1 -> 0
    reg [PTR_W-1:0]  rd_ptr;   // oldest entry (head); wraps DEPTH-1 -> 0
    integer          i;

    assign full  = (count == CNT_FULL);
    assign empty = (count == {CNT_W{1'b0}});

    // Accepted operations this cycle. A write into a full FIFO is allowed
    // only together with a read, which frees the head slot on the same edge.
    wire do_rd = rd_en && !empty;
    wire do_wr = wr_en && (!full || rd_en);

    always @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin
            wr_ptr  <= {PTR_W{1'b0}};
            rd_ptr  <= {PTR_W{1'b0}};
            count   <= {CNT_W{1'b0}};
            rd_data <= {DATA_W{1'b0}};
            for (i = 0; i < DEPTH; i = i + 1)
                mem[i] <= {DATA_W{1'b0}};
        end else begin
            if (do_wr) begin
                mem[wr_ptr] <= wr_data;
                wr_ptr      <= wr_ptr + 1'b1;
            end
            if (do_rd) begin
                // Non-blocking: when full, a same-cycle write to this slot
                // does not disturb the word being read out.
                rd_data <= mem[rd_ptr];
                rd_ptr  <= rd_ptr + 1'b1;
            end
            case ({do_wr, do_rd})
                2'b10:   count <= count + 1'b1;  // write only
                2'b01:   count <= count - 1'b1;  // read only
                default: count <= count;         // none, or both
            endcase
        end
    end

endmodule
