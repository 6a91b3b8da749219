# expect: 3: --num-layers: found '-4', expected a positive integer
# args: --cluster dgx-a100-80g --nodes 1
--num-layers -4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000
