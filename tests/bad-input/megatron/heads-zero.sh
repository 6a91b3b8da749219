# expect: 3: --num-attention-heads: found '0', expected a positive integer
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 0 --seq-length 128 --vocab-size 1000
