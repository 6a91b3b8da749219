# expect: no model: found neither --model nor --num-layers, --hidden-size and --num-attention-heads, expected one of them
# args: --cluster dgx-a100-80g --nodes 1
# nothing but a comment
