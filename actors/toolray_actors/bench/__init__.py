"""The heavy harnesses behind `toolray bench` and `toolray chaos`.

Raw-Ray baselines, rollout peers, the scopes workload and the chaos driver: imported only
when a command measures.
"""
