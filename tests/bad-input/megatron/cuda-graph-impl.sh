# expect: --cuda-graph-impl: found 'full', expected one of none, local, transformer_engine
# args: --cluster dgx-h100 --nodes 1
--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 \
  --cuda-graph-impl full
