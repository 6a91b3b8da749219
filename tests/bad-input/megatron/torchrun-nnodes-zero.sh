# expect: 2: launcher --nnodes: found '0', expected a positive integer (elastic MIN:MAX ranges are not modelled)
torchrun --nnodes 0 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2
