"""Where a run leaves one machine: Ray. Joining a cluster, the limits every process on it shares, runs split
into shards over its nodes and reward actors.

Why a package of its own, above reward/ and run/: it drives them (a shard is a run over some questions, a reward
actor holds a `RubricReward`) and hands lower layers what they need as collaborators at construction; nothing
below imports Ray. Ray is an optional extra (`pip install 'rubric-engine[ray]'`): every module here imports it
through `connect.require_ray`, so without it the single-machine paths work as before and a Ray option fails in one
line naming what to install.

May import reward/, run/ and every layer below them; only cli/ imports this package.
"""
