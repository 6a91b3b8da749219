# expect: --cp-comm-type: found a2a after p2p, expected one type for every layer
--tensor-model-parallel-size 2 --context-parallel-size 2 --cp-comm-type p2p a2a
