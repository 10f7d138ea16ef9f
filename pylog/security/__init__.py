"""Security as Kafka does it: listener protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), SASL
PLAIN, SCRAM and OAUTHBEARER (tokens of an OpenID Connect provider), principals, the standard
authorizer and connection limits.

The decision logic (SASL exchanges, ACL matching, connection counting) is sans-IO; the broker's
connections and the inter-node channels drive it.
"""
