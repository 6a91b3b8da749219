# expect: --fp8-amax-compute-algo: found 'mean' (did you mean 'max'?), expected one of most_recent, max
# args: --cluster dgx-h100 --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 \
  --bf16 --fp8-format hybrid --fp8-amax-compute-algo mean
