# expect: found no --hidden-size
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 4 --num-attention-heads 4 --seq-length 128
