# expect: found both --bf16 and --fp16
--bf16
--fp16
