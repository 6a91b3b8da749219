# expect: did you mean 'RMSNorm'
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 \
  --normalization RMSNorn
