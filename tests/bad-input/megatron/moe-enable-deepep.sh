# expect: --moe-enable-deepep: found it with the alltoall dispatcher, expected --moe-token-dispatcher-type flex
--num-experts 8 --moe-token-dispatcher-type alltoall --moe-enable-deepep
