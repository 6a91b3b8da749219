# expect: --pipeline-model-parallel-layout with --decoder-first-pipeline-num-layers
# args: --cluster dgx-a100-80g --nodes 1
--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 \
  --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3 \
  --pipeline-model-parallel-layout 'Et*3|t*5L'
