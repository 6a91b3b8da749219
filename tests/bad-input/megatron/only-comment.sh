# expect: found no command, expected Megatron-LM flags or a launch script
# args: --cluster dgx-a100-80g --nodes 1
# nothing but a comment
