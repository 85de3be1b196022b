// sat_counter: 4-bit saturating up/down counter.
//
//  * rst_n  : active-low SYNCHRONOUS reset; clears the count to 0.
//  * inc    : counts up by one per clock; saturates at 15 (stays there).
//  * dec    : counts down by one per clock; saturates at 0.
//  * inc and dec together: the count holds.
//  * at_max, at_min: combinational, high while the count is 15 / 0.
module sat_counter (
    input  wire       clk,
    input  wire       rst_n,
    input  wire       inc,
    input  wire       dec,
    output reg  [3:0] count,
    output wire       at_max,
    output wire       at_min
);

    assign at_max = (count == 4'd15);
    assign at_min = (count == 4'd0);

    always @(posedge clk) begin
        if (!rst_n)
            count <= 4'd0;
        else if (inc && !dec && !at_max)
            count <= count + 4'd1;
        else if (dec && !inc && !at_min)
            count <= count - 4'd1;
    end

endmodule
