# expect: --make-vocab-size-divisible-by 4611686018427387904: padding the vocabulary (1000) to a multiple of it times the
# args: --cluster dgx-a100-80g --nodes 1
--tensor-model-parallel-size 4 --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 --make-vocab-size-divisible-by 4611686018427387904
