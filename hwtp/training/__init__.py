"""What a trainer consumes: advantages, exports, the reward service (``hwtp serve``) and the
learning experiment (``hwtp learn``). The reward functions trainers import are ``hwtp.rewards``."""
