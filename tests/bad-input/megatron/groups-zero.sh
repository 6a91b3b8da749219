# expect: 3: --num-query-groups: found '0', expected a positive integer
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 4 --group-query-attention --num-query-groups 0 --seq-length 128 --vocab-size 1000
