# expect: cp=4 splits each 4100-token sequence into 2 x cp = 8 load-balanced chunks
--tensor-model-parallel-size 2 --context-parallel-size 4 --seq-length 4100
