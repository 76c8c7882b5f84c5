"""RabbitMQ: Dramatiq's broker with confirms (broker.py), settleq's queues declared
(declare.py), events published at commit (publisher.py), and what pika logs (logs.py)."""
