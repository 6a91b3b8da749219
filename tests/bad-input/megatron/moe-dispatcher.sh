# expect: mixture-of-experts models are not modelled
--num-experts 8
