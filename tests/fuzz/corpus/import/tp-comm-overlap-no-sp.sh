# expect: --tp-comm-overlap needs --sequence-parallel
--tensor-model-parallel-size 2 --tp-comm-overlap
