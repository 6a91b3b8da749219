# expect: --moe-token-dispatcher-type: found flex, expected alltoall or allgather
--num-experts 8 --moe-token-dispatcher-type flex
