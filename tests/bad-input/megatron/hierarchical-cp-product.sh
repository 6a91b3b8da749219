# expect: --hierarchical-context-parallel-sizes: found 2 x 2, expected two sizes of 2 or more whose product is --context-parallel-size 8
# args: --model llama3-8b --cluster dgx-h100 --nodes 1
--context-parallel-size 8 --seq-length 32768 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2
