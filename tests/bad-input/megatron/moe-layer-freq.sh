# expect: --moe-layer-freq: found '2', expected 1 or leading dense blocks
--num-experts 8 --moe-token-dispatcher-type alltoall --moe-layer-freq 2
