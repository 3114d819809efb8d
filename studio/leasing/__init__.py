"""leasing"""
